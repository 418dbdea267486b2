"""A Flower app that trains a small model with secagg-dp's secure sum as its aggregation."""
