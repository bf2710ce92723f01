"""Allocator models: how requested bytes become allocated and reserved bytes on a device."""
