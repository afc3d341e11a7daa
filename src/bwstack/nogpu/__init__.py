"""The parts that run without a GPU: the stand-in's images, the base root file system, tiny models."""
