"""Local stand-ins for model providers, speaking each provider's exact wire format."""
