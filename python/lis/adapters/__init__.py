"""Adapters that let trainer code use lis (docs/rl.md, "Trainers: the adapters").
Stdlib only; each subclasses its trainer's base class where the trainer is
installed, else a local base with the same methods:

- lis.adapters.rllm.LisEnv: rLLM's BaseEnv over step mode;
- lis.adapters.skyrl.LisTextEnv: SkyRL's BaseTextEnv over step mode;
- lis.adapters.verl.LisAgentLoop: a verl agent loop ("lis_env") holding one env
  per trajectory, the model called with verl's own generate;
- lis.adapters.verifiers.LisEnvironment: a verifiers Environment whose rollout
  is one episode against the trainer's endpoint;
- lis.prorl: NVIDIA ProRL Agent Server's HTTP API (`python -m lis.prorl`).
"""
