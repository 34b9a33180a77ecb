"""The pure build: typed objects in, listeners/virtual hosts/routes/clusters and problems out."""
