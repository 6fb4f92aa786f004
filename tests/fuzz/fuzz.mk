# Placeholder: the fuzz target's build and run rules (being written).
