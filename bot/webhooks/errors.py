class PayloadError(ValueError):
    """A webhook payload that does not have the shape its event promises."""
