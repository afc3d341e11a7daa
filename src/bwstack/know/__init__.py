"""Knowledge before launch: what the pinned SGLang, the image's kernels and the rules say about a profile."""
