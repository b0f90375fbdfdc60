from cachelint.cli import main

if __name__ == "__main__":  # not when a spawned pool worker imports this module again
    main()
