"""Floor 3: click commands only. Parse, call one function below, print, map errors to exit codes."""
