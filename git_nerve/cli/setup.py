COMMANDS: list = []
