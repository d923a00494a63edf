"""Every way fulfilling an order line can fail, one class per condition."""


class FulfilmentError(Exception):
    """Base of the errors this lesson raises on purpose."""


class InvalidOrderLineError(FulfilmentError):
    """The message body is not an order line; no retry can fix it."""


class StockUnavailableError(FulfilmentError):
    """The SKU is unknown or has too little stock; nothing was reserved.

    It may succeed later (the warehouse books the SKU in), so the message is retried,
    and after the queue's maxReceiveCount it waits in the dead-letter queue for a redrive.
    """
