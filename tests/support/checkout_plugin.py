"""The lab's checkout as the take-home plugin (idemlab.testing) runs it: the checkout's tables,
the card processor deployed as a function of its own, and each checkout handler in the zip
the lab deploys. The dogfood and the explore tests share it."""

from __future__ import annotations

import uuid

from idemlab import build, module_spec
from idemlab.lessons import checkout as checkout_lesson
from idemlab.module_spec import table_keys
from idemlab.testing import Handler
from support.checkout_in_process import environment

CODE = build.FUNCTIONS_DIR / "checkout"


def deploy_ledger(idemlab, prefix: str) -> checkout_lesson.Ledger:
    """The checkout's tables, named ``<prefix>-<key>``, and the card processor deployed as
    its own function (its own handler, not the plugin's, whose answer wraps the handler's)."""
    keys = table_keys("card_processor", *checkout_lesson.FUNCTION_KEYS)
    names = {key: idemlab.make_table(f"{prefix}-{key}", key=hash_key).name for key, hash_key in keys.items()}
    card_processor = f"{prefix}-card-processor-{uuid.uuid4().hex[:8]}"
    idemlab.client("lambda").create_function(
        FunctionName=card_processor,
        Runtime="python3.12",
        Role=idemlab.backend.role_arn,
        Handler="card_processor.handler",
        Code={"ZipFile": build.zip_bytes(build.source_files(CODE))},
        Timeout=int(module_spec.function("card_processor")["timeout"]),
        Environment={"Variables": module_spec.environment("card_processor", names)},
    )
    idemlab.environment.update(environment(names, card_processor))
    return checkout_lesson.Ledger(names["ledger"], idemlab.client("dynamodb"))


def checkout(strategy: str) -> Handler:
    """The handler in the zip the lab deploys: its folder and the ``shared`` package beside it."""
    return Handler.zip(build.zip_bytes(build.source_files(CODE)), f"checkout_{strategy}.handler")
