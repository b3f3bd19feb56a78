"""The build side: the runner, the stage modes, images (bases, toolchains), the buildx door and bake."""
