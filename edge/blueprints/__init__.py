"""The edge's routes, one blueprint per resource."""
