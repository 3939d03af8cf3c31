"""The world's training text: the pretraining mixture, copy drills, mid-training how-tos,
tutorial pages for synthesis, SFT demonstrations and reward-model preference pairs."""
