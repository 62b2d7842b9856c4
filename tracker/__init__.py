"""tracker: upstream change tracker and advisory daemon for Hugging Face model repositories."""

__version__ = "0.1.0"
