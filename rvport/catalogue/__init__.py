"""The catalogue: recipes, profiles, toolchains and base specs, as frozen values read from YAML."""
