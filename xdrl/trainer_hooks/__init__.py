"""Hooks attached to torchrl.trainers.Trainer."""
