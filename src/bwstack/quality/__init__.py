"""Quality you can compare: the same seeded prompts through two running servers (two profiles, or one
profile on two variants), their teacher-forced token distributions compared (KL divergence, top-1
agreement), and a needle retrieval task scored as accuracy by length. ``prompts`` (the seeded prompt set),
``divergence`` (pure math), ``retrieval`` (the needle task and its scoring), ``compare`` (the HTTP driver
and the report), ``show`` (its text and JSON).
"""
