"""Every SSH, subprocess, file and YAML operation lives here. No Textual."""
