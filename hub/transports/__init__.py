"""Transports: ways outside programs and people reach the hub besides chat."""
