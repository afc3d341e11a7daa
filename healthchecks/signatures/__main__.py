"""``python3 -m healthchecks.signatures``: print the class table the docs embed."""

from healthchecks.signatures import class_table

print(class_table(), end="")
