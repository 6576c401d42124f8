"""The engine: owns the state, runs scheduling rounds, validates and applies decisions.

One engine serves both clocks: a simulated clock (event heap) and, for the live manager, a
wall clock. See `Engine` (engine.py: rounds, the clock events' switch, applying decisions).
Its parts reach it through the protocols of ops.py: queues.py (queues, indexes, admission),
runs.py (run ends, kills, cancels), forwarding.py (jobs crossing to and from peers),
billing.py (budget, billing boundaries), recovery.py (what a restart re-enters), answers.py
(why a job waits), bags.py (bags of tasks), budgets.py (budget caps), view.py (what policies
read). The decisions it applies, each beside its validation and application, are
`isthmus.decisions` (a package below the policies and the engine).
"""
