"""Reinforcement learning over the engine: a Gymnasium environment and trained agents as policies.

- `isthmus.gym.env.SchedulingEnv`: the environment (needs the `gym` extra: ``pip install
  'isthmus[gym]'``), episodes of any workload isthmus reads on any environment;
- `isthmus.gym.agent`: a linear agent, its JSON weights file and a cross-entropy trainer;
- `isthmus.gym.policy.AgentPolicy`: a trained agent as the allocation policy ``gym-agent``
  (``isthmus simulate -p gym-agent:model=agent.json``), in simulation and in the live manager;
- `isthmus.gym.features`: the observation's arrays, built from the policies' read-only view.

Only `env` imports Gymnasium; the rest needs NumPy alone. docs/research.md shows the whole loop.
"""
