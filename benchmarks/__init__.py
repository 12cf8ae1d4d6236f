"""Measurements of the simulators: per-rung throughput, the result cache and agreement with measured data."""
