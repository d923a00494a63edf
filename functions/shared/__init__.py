"""What every lesson's Lambda code shares, bundled into every zip beside the lesson's own
folder (``idemlab.build``): the settings Terraform passes (``settings``), the boto3 clients
(``clients``) and the one fault contract (``faults``)."""
