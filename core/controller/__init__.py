"""The controller: the only code that talks to the API server.

Informers (list+watch into in-memory stores), a work queue, the reconciler that calls the pure
planner and applies its Plan, leader election, metrics and health endpoints. Everything here is
I/O; everything it decides comes from `t9kjobs.planner`.
"""
