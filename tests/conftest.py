import torch

# The machine has 2 cores; tests use tiny tensors, where extra threads only add contention.
torch.set_num_threads(1)
