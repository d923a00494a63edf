"""Background processes of the lab, each a small module with a ``run_once`` pass tests can call."""
