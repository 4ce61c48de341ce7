"""The results database: every measurement a device's runs made, kept across reruns, and the
verdict each re-measured cell got against its previous measurement."""
