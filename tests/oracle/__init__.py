"""The plain Python/numpy versions of the compiled kernels (engine/csrc): not a runtime path, only
what the property tests hold each kernel to, byte for byte."""
