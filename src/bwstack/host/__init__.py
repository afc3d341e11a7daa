"""This host: doctor, fetch, the model cache, calibrate, choosing a profile, up/down/build over Compose."""
