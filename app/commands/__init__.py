"""Commands: the modules behind `oakwatch`'s subcommands (app.cli parses and dispatches).
"""
