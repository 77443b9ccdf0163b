"""Spiders of the crawler project."""
