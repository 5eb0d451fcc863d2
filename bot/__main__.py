from bot.cli import main

if __name__ == "__main__":  # not when a worker process (bot/offload.py) imports it
    raise SystemExit(main())
