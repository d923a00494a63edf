"""Background processes of the lab, each its own small module with a ``run_once`` pass:
the scheduler firer (``SchedulerFirer.run_once``: schedules that fire on backends that only
store them) and the dead-letter redrive."""
