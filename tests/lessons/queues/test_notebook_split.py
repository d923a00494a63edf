"""Issue 24, item 8: notebook 06's naive story holds however Lambda batches its two lines.

On AWS several pollers read a standard queue, so the good line and the poison line may
come in different batches. Here the split is made deterministic: the good line is sent
and consumed alone first, then the poison line; the notebook's own cells then check it.
"""

from __future__ import annotations

import matplotlib
import pytest

from idemlab.lessons import queues
from support.notebook_cells import code_cells, index_of, run_cells

matplotlib.use("Agg")
pytestmark = [pytest.mark.stack, pytest.mark.timeout(400)]


def test_the_naive_story_holds_when_the_two_lines_come_in_different_batches(stack):
    orders = queues.Orders(stack)
    naive = queues.Scenario("naive")
    orders.book_in(naive.sku("mug"))
    good = queues.line(naive.order_id(1), naive.sku("mug"))
    poison = queues.line(naive.order_id(2), naive.sku("teapot"))
    mark = orders.depths()
    orders.send("orders_naive", good)
    orders.wait_until(
        lambda: orders.reservations(naive)[queues.business_key(good)] == 1 and orders.depth("orders_naive") == 0,
        120,
        "the good line consumed alone",
    )
    orders.send("orders_naive", poison)
    cells = code_cells("06_queues.ipynb")
    sent = index_of(cells, "orders.send(queue, good, poison)")
    story = {"orders": orders, "queues": queues, "naive": naive, "lines": {"naive": (good, poison)}, "mark": mark}
    run_cells(cells[sent + 1 : sent + 3], story)  # the notebook's wait and its assertions
