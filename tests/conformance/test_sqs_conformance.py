"""SQS: a FIFO message group hands out its messages in order, also when they come back."""

import uuid


def test_a_fifo_group_comes_back_in_order_to_a_receive_already_waiting(sandbox):
    """Messages of one group are received in the order they were sent. Two received
    together and not deleted come back when their visibility timeout ends; a long poll
    that was already waiting then gets the first of them, not the second.

    https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/FIFO-queues-understanding-logic.html
    (messages of a group are received in order; a group in flight returns nothing more)
    """
    sqs = sandbox.client("sqs")
    url = sqs.create_queue(
        QueueName=f"{sandbox.name('group')}.fifo",
        Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"},
    )["QueueUrl"]
    sandbox.on_teardown(sqs.delete_queue, QueueUrl=url)
    group = uuid.uuid4().hex
    for body in ("first", "second"):
        sqs.send_message(QueueUrl=url, MessageBody=body, MessageGroupId=group)

    taken = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=2)["Messages"]
    assert [message["Body"] for message in taken] == ["first", "second"]
    # Waits up to 10 s; both become visible again about 2 s into it.
    again = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1, WaitTimeSeconds=10, VisibilityTimeout=30)[
        "Messages"
    ]
    assert [message["Body"] for message in again] == ["first"]
