from rvport.cli.entry import main

main()
