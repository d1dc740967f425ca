"""The loader wing: Grain settings searched, modelled and explained (the tuner, the loader
model and its what-if, storage, why more workers stop helping, compare's findings)."""
