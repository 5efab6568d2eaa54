"""Test helpers: a tiny local chat model builder and a scripted OpenAI-compatible server."""
