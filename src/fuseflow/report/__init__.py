"""What people look at: overview pictures of compiled schedules, interactive HTML reports, notebook display."""
