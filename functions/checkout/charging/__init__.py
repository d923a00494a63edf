"""What the checkout handlers and the card processor share: request validation,
outcomes, errors, the step trace, fault injection and the call to the processor."""
