"""Storage, below the science: the content-keyed cache of trained models, the artifact tier
behind the committed book, and checkpoints written atomically and read verified."""
