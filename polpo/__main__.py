from polpo.cli import main

main()
