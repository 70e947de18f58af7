"""Raptor companion."""
