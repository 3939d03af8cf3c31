"""Pure RL math: advantages, policy losses, distillation advantages (imports only torch)."""
