"""The paper's §3 program at scale: DINOv2-B distilled into Raptors on ImageNet-1k, then Table 1's
probes (``torchrun -m raptor.dinov2.pipeline``). Nothing in the book layer imports it."""
