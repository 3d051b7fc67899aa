"""Built-in workflows, run by name (`git nerve run develop`). A repository's own
``.nerve/workflows/<name>.py`` takes precedence over a built-in of the same name."""
