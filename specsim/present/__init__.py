"""Presentation: result rows of every command, text and JSON rendering, figures."""
