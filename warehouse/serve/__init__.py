"""What readers use: the report, the dashboard, the serving file and the hive export."""
