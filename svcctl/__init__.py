"""svcctl: the admin command line for engineers and the portal's back office, over gRPC."""
